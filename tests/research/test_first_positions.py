"""research/first_positions.py: the layout it builds keeps the question where the app puts it."""

import pytest


def test_first_positions_probe_keeps_the_question_at_a_chunk_end():
    from drt_core.tokenizer import PAD_ID
    from research.first_positions import aligned, prefix_tokens

    S1 = 4
    ctx, question = [6, 7, 8, 9, 10, 11], [21, 22, 23, 24]  # 6 context tokens, 3 pads, a 4-token question
    prompt = ctx + [PAD_ID] * 3 + question
    end = len(prompt) - 1
    assert end % S1 == 0  # the app's layout: the prompt's last token on a chunk's first slot
    # the question starts a chunk of its own: with k > 2 the haystack (6 + k tokens) spills into the
    # question's chunk, so everything after the haystack moves by a whole chunk
    for k in range(0, 6):
        pre = list(range(100, 100 + k))
        ids = aligned(prompt, len(ctx), pre, S1)
        new_end = len(ids) - 1
        assert ids[:k + len(ctx)] == pre + ctx and ids[new_end - 3:] == question
        assert new_end % S1 == end % S1
        assert new_end == end + (0 if k <= 2 else S1)
        assert set(ids[k + len(ctx): new_end - 3]) <= {PAD_ID}
    hay = list(range(1000, 1100))
    assert prefix_tokens(0, hay, 3) == [] and prefix_tokens(1, hay, 3) == [3]
    assert prefix_tokens(4, hay, 3) == hay[58:62]
    with pytest.raises(SystemExit):
        prefix_tokens(63, hay, 3)
