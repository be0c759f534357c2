"""Given names that tell a person's sex: English, French, German, Italian and Spanish forms common in
the books of the eighteenth and nineteenth centuries (and the Bible's), written here by hand. Names
given to both sexes ("Jean", "Marion", "Evelyn", "Claude", "Camille", "Leslie") are in neither list.

`qa.cast` reads a full name's first word against these before it trusts the pronouns after it: the
pronouns after "Henry Crawford" are as often his sister's as his own.
"""

from __future__ import annotations

MALE_GIVEN = frozenset("""
Aaron Abel Abraham Adam Adolphe Adolphus Adrian Albert Alexander Alexandre Alexis Alfred Algernon Alonzo
Amos Andrew Anthony Antoine Antonio Archibald Armand Arnold Arthur Augustin Augustine Augustus
Aymeric Balthazar Barnabas Bartholomew Basil Benedict Benjamin Bernard Bertrand Bob Caleb Carl Carlos
Cecil Cesar César Charles Christian Christopher Claudius Clement Conrad Cornelius Cosmo Cuthbert Cyril
Cyrus Daniel David Denis Dennis Diego Dick Dominic Donald Duncan Ebenezer Edgar Edmund Edouard Édouard
Edward Edwin Egbert Eli Elijah Elisha Emile Émile Emmanuel Enoch Ephraim Erasmus Ernest Esau Étienne
Etienne Eugene Eugène Eustace Ezekiel Ezra Felix Ferdinand Fernand Francesco Francis Francisco François
Frank Franz Fred Frederic Frederick Frédéric Friedrich Gabriel Gaspard Gaston Geoffrey George Georges
Gerald Gerard Gilbert Giles Giovanni Giuseppe Godfrey Gregory Guillaume Gustave Guy Hal Hans Harold Harry
Heinrich Henri Henry Herbert Hercules Horace Horatio Hubert Hugh Hugo Humphrey Ichabod Ignatius Isaac
Isaiah Ishmael Jack Jacob Jacques James Jasper Jeremiah Jeremy Jerome Jim Joachim Job Johann Johannes
John Jonas Jonathan Joseph Josiah Joshua Juan Jules Julian Julius Karl Lancelot Laurence Lawrence
Lazarus Leonard Leopold Lewis Lionel Lorenzo Louis Luc Lucas Lucien Ludovic Luigi Luke Malcolm Manuel
Marcel Marco Mark Martin Matthew Matthias Maurice Max Maximilian Michael Michel Miles Moses Napoleon
Nathan Nathaniel Ned Nicholas Nicolas Noah Noel Oliver Olivier Oscar Oswald Owen Pablo Patrick Paul
Pedro Percival Percy Peter Philip Philippe Pierre Ralph Raoul Raymond Reginald Reuben Richard Robert
Roderick Rodolphe Roger Roland Rowland Rudolph Rupert Samson Samuel Saul Sebastian Septimus Seth Silas
Simeon Simon Solomon Stephen Tim Timothy Titus Tobias Toby Tom Thomas Tristram Valentine Victor Vincent
Walter Wilfred Wilhelm Will William Willoughby Zachary
""".split())

FEMALE_GIVEN = frozenset("""
Ada Adela Adelaide Adèle Adele Agatha Agnes Alice Alicia Amelia Amy Anastasia Angela Angelica Ann Anna
Anne Annette Annie Antoinette Arabella Augusta Barbara Beatrice Becky Bella Berenice Bertha Bessie Bessy
Betsey Betsy Betty Blanche Bridget Caroline Catherine Cecilia Cecily Celia Charlotte Christina Christine
Clara Clarissa Claudine Constance Cordelia Cornelia Cynthia Deborah Diana Diane Dinah Dolly Dora
Dorothea Dorothy Drusilla Edith Eleanor Eleanora Elinor Eliza Elizabeth Ellen Ellie Elsie Emily Emma
Esther Eugenia Eugénie Eulalie Euphemia Eva Eve Evelina Fanny Flora Florence Frances Geneviève
Genevieve Georgiana Georgina Gertrude Grace Hannah Harriet Harriett Helen Helena Hélène Henrietta Hester
Hetty Honora Ida Isabel Isabella Isabelle Jane Janet Jeanne Jemima Jenny Jessie Joan Josephine Joséphine
Judith Julia Julie Juliet Juliette Kate Katharine Katherine Kitty Laura Lavinia Leah Letitia Lilian
Lily Livia Lizzie Lizzy Louisa Louise Lucia Lucie Lucy Lydia Mabel Madeleine Madeline Margaret Margery
Marguerite Maria Marianne Marie Martha Mary Matilda Maud Meg Milly Minnie Miriam Molly Nancy Nell Nelly
Olivia Patience Pauline Peggy Penelope Phoebe Polly Priscilla Prudence Rachel Rebecca Rhoda Rosa Rosalind
Rosamond Rose Ruth Sally Sarah Sophia Sophie Susan Susanna Susannah Sybil Sylvia Teresa Theresa Thomasina
Ursula Victoria Violet Virginia Wilhelmina Winifred
""".split())


def given_sex(word: str) -> str | None:
    """"m" or "f" for a given name these lists hold, else None."""
    return "m" if word in MALE_GIVEN else "f" if word in FEMALE_GIVEN else None


# the familiar forms of given names (English usage of the period): "Becky" is Rebecca, "Jos" Joseph.
# `qa.cast` joins a familiar form to the one person the book names in full with one of its given names.
NICKNAMES = {
    "Becky": ("Rebecca",), "Emmy": ("Amelia", "Emily", "Emma"), "Jos": ("Joseph",), "Joe": ("Joseph",),
    "Georgy": ("George",), "Georgie": ("George",), "Bill": ("William",), "Billy": ("William",),
    "Will": ("William",), "Willy": ("William",), "Bob": ("Robert",), "Bobby": ("Robert",), "Rob": ("Robert",),
    "Dick": ("Richard",), "Tom": ("Thomas",), "Tommy": ("Thomas",), "Ned": ("Edward", "Edmund"),
    "Teddy": ("Edward",), "Harry": ("Henry",), "Hal": ("Henry",), "Jack": ("John",), "Johnny": ("John",),
    "Jem": ("James",), "Jim": ("James",), "Jemmy": ("James",), "Jamie": ("James",), "Sam": ("Samuel",),
    "Sammy": ("Samuel",), "Ben": ("Benjamin",), "Nat": ("Nathaniel",), "Nick": ("Nicholas",),
    "Kit": ("Christopher",), "Charley": ("Charles",), "Charlie": ("Charles",), "Fred": ("Frederick",),
    "Freddy": ("Frederick",), "Fritz": ("Friedrich",), "Tony": ("Anthony",), "Matt": ("Matthew",),
    "Kate": ("Catherine", "Katharine", "Katherine"), "Kitty": ("Catherine", "Katharine", "Katherine"),
    "Katy": ("Catherine", "Katharine", "Katherine"), "Bess": ("Elizabeth",), "Betsy": ("Elizabeth",),
    "Betty": ("Elizabeth",), "Lizzy": ("Elizabeth",), "Lizzie": ("Elizabeth",), "Eliza": ("Elizabeth",),
    "Polly": ("Mary",), "Molly": ("Mary",), "Peggy": ("Margaret",), "Meg": ("Margaret",), "Maggie": ("Margaret",),
    "Nelly": ("Ellen", "Eleanor", "Helen"), "Nell": ("Ellen", "Eleanor", "Helen"), "Sally": ("Sarah",),
    "Patty": ("Martha",), "Matty": ("Matilda", "Martha"), "Fanny": ("Frances",), "Jenny": ("Jane",),
    "Nancy": ("Ann", "Anne", "Anna"), "Sukey": ("Susan",), "Dolly": ("Dorothy",),
    "Tamsin": ("Thomasin", "Thomasina"), "Tamsie": ("Thomasin", "Thomasina"), "Dora": ("Dorothea",),
    "Gussie": ("Augusta",), "Lotty": ("Charlotte",), "Lottie": ("Charlotte",), "Milly": ("Millicent", "Amelia"),
    "Sissy": ("Cecilia", "Cecily"), "Cissy": ("Cecilia", "Cecily"), "Lou": ("Louisa", "Louise"),
    "Tilly": ("Matilda",), "Annie": ("Ann", "Anne", "Anna"), "Hetty": ("Hester", "Henrietta", "Harriet"),
    "Sophy": ("Sophia",), "Livy": ("Olivia",), "Davy": ("David",), "Dave": ("David",), "Bertie": ("Albert", "Herbert"),
}
