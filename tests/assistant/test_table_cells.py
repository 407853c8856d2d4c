"""A question that names one table cell is answered with it (answering.cells), from the row
sentences the index writes (ingestion.tables.table_rows); anything less certain is left to
the model. Grids shaped like the evaluation's tables: pscl's two-level Table 2, coin's
stacked psoriasis blocks, an age table with ranges."""

from __future__ import annotations

from assistant.answering import cells
from assistant.answering.types import Source
from assistant.retrieval.types import Hit
from ingestion.tables import table_rows

COUNTREG = [
    ["", "GLM", "GLM", "zero-augmented", "zero-augmented"],
    ["Type", "Poisson", "NB", "Hurdle-NB", "ZINB"],
    ["", "ML", "ML", "ML", "ML"],
    ["Object", "fm_pois", "fm_nbin", "fm_hurdle", "fm_zinb"],
    ["no. parameters", "18", "19", "37", "37"],
    ["AIC", "35959.2", "24359.1", "24210.1", "24211.4"],
    ["BIC", "36010.4", "24412.5", "24315.5", "24307.3"],
    ["zeros", "47", "608", "683", "683"],
]
PSORIASIS = [
    ["IL1B_511 locus", "", "", "", ""],
    ["Male", "Control", "Early Onset", "Late Onset", "Total"],
    ["CC", "75", "54", "29", "158"],
    ["CT", "84", "91", "38", "213"],
    ["Female", "Control", "Early Onset", "Late Onset", "Total"],
    ["CC", "76", "58", "26", "160"],
    ["CT", "89", "92", "41", "222"],
]
AGES = [
    ["Age", "FLC < 3.38", "FLC 3.38-4.71", "FLC > 4.71"],
    ["50–59", "2207", "1076", "432"],
    ["60–69", "1690", "1138", "694"],
    ["70–79", "763", "887", "846"],
]


def table(rows: list[list[str]], depth: int, number: int = 1, kind: str = "table", name: str = "t.pdf") -> Source:
    markdown = "\n".join("|" + "|".join(row) + "|" for row in rows)
    sentences = "\n".join(row.sentence for row in table_rows(rows, depth))
    text = f"{markdown}\n\n{sentences}"
    return Source(number, Hit(number, 1, number, name, name, number, 3, "pdf_page", kind, text, {}))


def value(question: str, *sources: Source) -> str | None:
    cell = cells.read(question, sources)
    return cell.value if cell else None


def test_the_cell_named_by_its_row_and_every_column_level_is_read():
    countreg = table(COUNTREG, 4)
    assert value("What AIC does the negative binomial model (fm_nbin) have?", countreg) == "24359.1"
    assert (
        value("pscl 计数回归小册子的表 2 里，零膨胀负二项模型（ZINB，fm_zinb）的 BIC 是多少？", countreg) == "24307.3"
    )
    cell = cells.read("How many zeros does the hurdle model fm_hurdle predict?", [countreg])
    assert cell is not None
    assert (cell.row, cell.column, cell.value) == ("zeros", "zero-augmented, Hurdle-NB, ML, fm_hurdle", "683")
    assert cell.sentence.startswith("zeros — GLM, Poisson, ML, fm_pois: 47;")


def test_stacked_blocks_sexes_and_ranges_are_named_as_people_say_them():
    psoriasis = table(PSORIASIS, 2)
    assert value("How many women with genotype CC at the IL1B_511 locus are controls?", psoriasis) == "76"
    assert value("How many male controls have genotype CT at IL1B_511?", psoriasis) == "84"
    assert value("IL1B_511 位点男性 CC 基因型的 Total 是多少？", psoriasis) == "158"
    assert value("IL1B_511 位点的女性对照组中 CT 基因型有多少人？", psoriasis) == "89"
    ages = table(AGES, 1)
    assert value("How many subjects aged 60 to 69 are in the lowest FLC group (below 3.38)?", ages) == "1690"


def test_a_question_that_does_not_name_one_cell_is_left_to_the_model():
    countreg, psoriasis = table(COUNTREG, 4), table(PSORIASIS, 2, number=2)
    assert value("What is the AIC of the models?", countreg) is None  # the row, but no column
    assert value("Which model has the most parameters, fm_pois or fm_zinb?", countreg) is None  # two cells tie
    assert value("How many controls have genotype CC at IL1B_511?", psoriasis) is None  # men or women?
    assert value("What does the table say about fm_nbin?", countreg) is None  # a column, no row
    steps = table([["", "Start", "Step 1", "Step 2"], ["AIC", "1872.1", "407.6", "405.2"]], 1)
    assert value("表 1 里，起始模型（Start）的 AIC 是多少？", steps) == "1872.1"  # 表 1 is not "Step 1"
    assert value("In Table 1, what AIC does Step 1 give?", steps) == "407.6"
    prose = table(COUNTREG, 4, kind="text")  # row sentences only count in a table chunk
    assert value("What AIC does the negative binomial model (fm_nbin) have?", prose) is None
    assert value("What is the Junior value in March?", countreg, psoriasis) is None  # nothing named


def test_words_that_name_the_file_name_no_cell():
    deaths = table(
        [
            ["Name", "Profession", "Age", "Date of birth", "Date of death"],
            ["Jo Cox", "politician", "41", "1974-06-22", "2016-06-16"],
            ["David Bowie", "musician", "69", "1947-01-08", "2016-01-10"],
        ],
        1,
        name="deaths.xlsx",
    )
    # "deaths" names the spreadsheet, not the "Date of death" column: no column is named.
    assert value("According to the deaths spreadsheet, how old was Jo Cox when she died?", deaths) is None
    assert value("According to the deaths spreadsheet, what is David Bowie's date of birth?", deaths) == "1947-01-08"


def test_a_table_ranked_under_the_passages_is_read_and_brought_in_as_the_last_one():
    prose = [table(COUNTREG, 4, number=n, kind="text").hit for n in range(1, 5)]
    later = [table(AGES, 1, number=5, kind="text").hit, table(COUNTREG, 4, number=6).hit]
    sources, cell = cells.with_cell("What AIC does the negative binomial model (fm_nbin) have?", prose, later)
    assert cell is not None
    assert cell.value == "24359.1"
    assert [source.number for source in sources] == [1, 2, 3, 4]
    assert [source.hit for source in sources] == [*prose[:3], later[1]]
    assert cell.source is sources[-1]
    # Nothing named: the passages as they were.
    sources, cell = cells.with_cell("What is the Junior value in March?", prose, later)
    assert cell is None
    assert [source.hit for source in sources] == prose
    # No passage at all: no cell either, whatever came later.
    assert cells.with_cell("What AIC does the negative binomial model (fm_nbin) have?", [], later) == ((), None)


def test_a_tables_only_row_must_be_named_too():
    deaths = table([["Name", "Profession", "Date of birth"], ["Pat Summit", "coach", "1952-06-14"]], 1)
    # "dates" names the column; nothing names the row: a question about something else.
    assert value("Which function then strips the dates off to give a plain matrix?", deaths) is None
    assert value("What is Pat Summit's date of birth?", deaths) == "1952-06-14"


def test_a_table_found_twice_is_read_once():
    countreg = table(COUNTREG, 4, number=5).hit
    prose = [table(COUNTREG, 4, number=n, kind="text").hit for n in range(1, 5)]
    sources, cell = cells.with_cell("What AIC does fm_nbin have?", prose, [countreg, countreg])
    assert cell is not None
    assert cell.value == "24359.1"
    assert [source.hit.chunk_id for source in sources] == [1, 2, 3, 5]


def test_a_row_header_joined_by_a_hyphen_is_one_name():
    header = ["软件包", "流行度", "大小"]
    packages = table([header, ["git-buildpackage", "V:1, I:10", "7351"], ["debhelper", "V:50, I:200", "900"]], 1)
    kernel = table([header, ["git", "V:300, I:500", "46412"], ["gcc", "V:70, I:400", "36"]], 1)
    # "git" names the row "git", not the package "git-buildpackage".
    assert value("git 软件包的大小是多少？", packages) is None
    assert value("git 软件包的大小是多少？", packages, kernel) == "46412"
    assert value("What is the size of git-buildpackage?", packages, kernel) == "7351"
    # A column header's compound still names its parts: "the hurdle model" is "Hurdle-NB".
    assert value("What AIC does the hurdle model have?", table(COUNTREG, 4)) == "24210.1"


def test_a_cell_is_read_only_from_a_table_that_holds_the_chinese_names_the_question_gives():
    """ "神农架林区的 12 位…代码" names row "第 12 节" and column "代码实现" of a table of contents
    by their words alone; the districts' table holds the name, the contents do not."""
    rows = [["章节", "第 14 节 代码实现", "页码"], ["第 12 节 宏集依赖", "版本历史", "30"]]
    rows.append(["第 13 节 排版", "字体", "40"])
    contents = table(rows, 1, number=1, name="ctex.pdf")
    question = "神农架林区的 12 位行政区划代码是多少？"
    assert value("第 12 节的代码实现在哪一页？", contents) is not None  # without a name: read as before
    assert value(question, contents) is None
    districts = table([["名称", "代码"], ["神农架林区", "429021000000"], ["武汉市", "420100000000"]], 1, number=2)
    assert value(question, contents, districts) == "429021000000"
