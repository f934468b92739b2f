"""The text table renderer: widths, cutting, plain cells (expected lines written out)."""

from __future__ import annotations

from tbdtrace.report.textui import Console, Table, cell_len, clip


def _render(t: Table, width: int = 160) -> list[str]:
    con = Console(record=True, width=width)
    con.print(t)
    return con.export_text().splitlines()


def test_table_with_header_draws_heavy_head_and_justifies() -> None:
    t = Table(title="Kernels")
    t.add_column("Count", justify="right")
    t.add_column("Name")
    t.add_row("1,234", "gemm")
    t.add_row("5", "relu_kernel")
    assert _render(t) == [
        "Kernels",
        "┏━━━━━━━┳━━━━━━━━━━━━━┓",
        "┃ Count ┃ Name        ┃",
        "┡━━━━━━━╇━━━━━━━━━━━━━┩",
        "│ 1,234 │ gemm        │",
        "│     5 │ relu_kernel │",
        "└───────┴─────────────┘",
    ]


def test_table_without_header_uses_a_light_top() -> None:
    t = Table(title="Summary", show_header=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("kernels", "7")
    assert _render(t) == ["Summary", "┌─────────┬───┐", "│ kernels │ 7 │", "└─────────┴───┘"]


def test_too_wide_tables_cut_name_columns_only() -> None:
    t = Table()
    t.add_column("Total", justify="right")
    t.add_column("Name")
    t.add_row("162.000 us", "x" * 50)
    lines = _render(t, width=40)
    assert all(cell_len(ln) <= 40 for ln in lines)
    body = lines[3]
    assert "162.000 us" in body  # the number is whole
    assert body.rstrip("│ ").endswith("…")
    assert body == "│ 162.000 us │ " + "x" * 22 + "… │"


def test_cells_are_plain_text() -> None:
    t = Table(show_header=False)
    t.add_column("Name")
    t.add_row("void k<int[3]>(float*) [x]")  # brackets in names are printed as they are
    t.add_row("[bold]total[/bold]")  # the reports' own markup is dropped off a terminal
    lines = _render(t)
    assert lines[1] == "│ void k<int[3]>(float*) [x] │"
    assert lines[2] == "│ total                      │"


def test_clip_and_wide_characters() -> None:
    assert clip("abcdef", 4) == "abc…" and clip("abc", 4) == "abc"
    assert cell_len("名前") == 4 and cell_len("ab") == 2
    assert cell_len(clip("名前です", 5)) <= 5


def test_console_print_drops_markup_off_a_terminal() -> None:
    con = Console(record=True)
    con.print("[bold]tbdtrace report[/bold]: x [FLOPs: ops.flops]")
    assert con.export_text() == "tbdtrace report: x [FLOPs: ops.flops]\n"
