"""`metaeval audit init DIR`: a minimal Harbor benchmark to edit into your own.

Two tasks: `line-count` is clean; `csv-total` carries one seeded defect (its instruction
names one output file, its checker reads another), listed in `gold.json` so `audit score`
has something to score. Both use only Python's standard library and run in bubblewrap
(no Dockerfile). The layout is documented in docs/formats/audit-benchmark.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from metaeval.console import make_console
from metaeval.scaffold_files import write_files

out = make_console(markup=False)

TASK_TOML = """\
version = "1.0"

[metadata]
author_name = "you"
difficulty = "easy"
category = "data-processing"
tags = ["python"]

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 300.0

[environment]
cpus = 1
memory_mb = 1024
storage_mb = 512
allow_internet = false
"""

TEST_SH = """\
#!/bin/bash
# Verifier: run the checker, then write the reward the harness reads (1 pass, 0 fail).
mkdir -p /logs/verifier
if python3 /tests/check.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

FILES: dict[str, str] = {
    "README.md": """\
# My benchmark

Made by `metaeval audit init`. Each folder is one Harbor task; `gold.json` lists the
known defects `metaeval audit score` compares findings with. `csv-total` has a seeded
defect (its instruction says `/app/total.txt`, its checker reads `/app/sum.txt`): fix it or
replace both tasks with your own, and keep `gold.json` in step.
""",
    "gold.json": """\
{
  "tasks": {
    "line-count": {"issues": []},
    "csv-total": {
      "issues": [
        {
          "id": "MB-01",
          "category": "EVAL-MISMATCH",
          "description": "The instruction asks for /app/total.txt, but the checker reads /app/sum.txt, so an agent that follows the instruction fails."
        }
      ]
    }
  }
}
""",
    "line-count/task.toml": TASK_TOML,
    "line-count/instruction.md": """\
# Count the lines of a file

`/app/notes.txt` is a text file. Count its lines and write the count as a plain integer
followed by a newline to `/app/line_count.txt`.
""",
    "line-count/environment/notes.txt": "buy milk\ncall the plumber\nwater the plants\n",
    "line-count/solution/solve.sh": """\
#!/bin/bash
set -euo pipefail
wc -l < /app/notes.txt | tr -d ' ' > /app/line_count.txt
""",
    "line-count/tests/test.sh": TEST_SH,
    "line-count/tests/check.py": """\
\"\"\"Checks /app/line_count.txt against the known line count of notes.txt.\"\"\"

import sys
from pathlib import Path

out = Path("/app/line_count.txt")
if not out.is_file() or out.read_text(encoding="utf-8").strip() != "3":
    print("FAIL: /app/line_count.txt must hold 3")
    sys.exit(1)
print("PASS")
""",
    "csv-total/task.toml": TASK_TOML,
    "csv-total/instruction.md": """\
# Total of a column

`/app/orders.csv` has the columns `item` and `amount`. Add up the `amount` column and write
the total as a plain integer followed by a newline to `/app/total.txt`.
""",
    "csv-total/environment/orders.csv": "item,amount\npen,3\nbook,12\nlamp,25\n",
    "csv-total/solution/solve.sh": """\
#!/bin/bash
set -euo pipefail
python3 - <<'EOF'
import csv
from pathlib import Path

with open("/app/orders.csv", newline="", encoding="utf-8") as f:
    total = sum(int(row["amount"]) for row in csv.DictReader(f))
Path("/app/sum.txt").write_text(f"{total}\\n", encoding="utf-8")
EOF
""",
    "csv-total/tests/test.sh": TEST_SH,
    "csv-total/tests/check.py": """\
\"\"\"Checks the total of the amount column.\"\"\"

import sys
from pathlib import Path

out = Path("/app/sum.txt")
if not out.is_file() or out.read_text(encoding="utf-8").strip() != "40":
    print("FAIL: /app/sum.txt must hold 40")
    sys.exit(1)
print("PASS")
""",
}


def init_cmd(
    dest: Annotated[Path, typer.Argument(help="New benchmark directory (absent or empty).")],
) -> None:
    """Write a minimal Harbor benchmark (two tasks and gold.json) to edit into your own."""
    write_files(dest, FILES)
    tasks = sorted({rel.split("/", 1)[0] for rel in FILES if "/" in rel})
    out.print(f"wrote {dest}: tasks {', '.join(tasks)}, gold.json, README.md")
    out.print("next:")
    out.print(f"  metaeval audit run {dest} --static-only -o runs/my-audit")
    out.print(f"  metaeval audit score runs/my-audit --gold {dest / 'gold.json'} --judge category")
    out.print("layout: docs/formats/audit-benchmark.md; gold.json: metaeval schema audit-gold")
