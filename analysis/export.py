"""`./run.py query SQL --parquet FILE`: a query's result as Parquet (pyarrow),
for pandas users. Column types come from the values: integers, floats (a
column mixing both is float), text; NULLs stay NULL; a column of NULLs only
is text. Written to a temporary file and renamed, so a failure leaves no
half file."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


class ExportError(RuntimeError):
    pass


def _type(values):
    import pyarrow as pa
    kinds = {type(v) for v in values if v is not None}
    if kinds and kinds <= {int}:
        return pa.int64()
    if kinds and kinds <= {int, float}:
        return pa.float64()
    if kinds == {bytes}:
        return pa.binary()
    return pa.string()


def parquet(cols: list[str], rows: list[tuple], path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq
    path = Path(path)
    if len(set(cols)) != len(cols):
        raise ExportError(f"--parquet: the query's column names must be unique (use AS), got {', '.join(cols)}")
    arrays = []
    for i in range(len(cols)):
        vals = [r[i] for r in rows]
        t = _type(vals)
        if t == pa.string():
            vals = [None if v is None else str(v) for v in vals]
        elif t == pa.float64():
            vals = [None if v is None else float(v) for v in vals]
        arrays.append(pa.array(vals, type=t))
    table = pa.Table.from_arrays(arrays, names=list(cols))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
        os.close(fd)
    except OSError as e:
        raise ExportError(f"{path}: cannot write there ({e.strerror})") from None
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except (OSError, pa.ArrowException) as e:
        Path(tmp).unlink(missing_ok=True)
        raise ExportError(f"{path}: cannot write the Parquet file ({e})") from None
    return len(rows)
