# SPDX-License-Identifier: MIT
# gen_sql.py - writes the SQL script for the sqlite3 workload on stdout: a table with two
# indexes and ROWS (default 200000) single-row INSERT statements in one transaction, then a
# few aggregate queries. Each statement is prepared separately by the sqlite3 shell, which
# is where most of the ~7.5M allocation calls come from. Deterministic (no randomness).
import sys

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
out = sys.stdout
out.write("PRAGMA journal_mode=OFF;\n")
out.write("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, city TEXT, score REAL, tag TEXT);\n")
out.write("CREATE INDEX t_name ON t(name);\nCREATE INDEX t_city_score ON t(city, score);\n")
out.write("BEGIN;\n")
cities = ["Lisbon", "Oslo", "Quito", "Hanoi", "Dakar", "Perth", "Lima", "Riga"]
for i in range(rows):
    h = (i * 2654435761) & 0xFFFFFFFF
    out.write("INSERT INTO t(name, city, score, tag) VALUES('user_%08x_%d', '%s', %d.%02d, '%s');\n"
              % (h, i, cities[h % 8], h % 1000, i % 100, "t" * (h % 40)))
out.write("COMMIT;\n")
out.write("SELECT city, count(*), round(avg(score), 2) FROM t GROUP BY city ORDER BY city;\n")
out.write("SELECT count(*) FROM t WHERE name LIKE 'user_0%';\n")
