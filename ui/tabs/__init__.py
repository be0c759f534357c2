"""One module per tab of the app, as kotaemon lays out its pages: each holds the tab's handlers
(plain functions, testable without a browser), `layout()`, which builds its components inside the
app's `gr.Tabs` and returns them as a dataclass, `wire()`, which registers its events, and `api()`,
its named endpoints for gradio_client. `ui.blocks` assembles them and wires what crosses tabs."""
