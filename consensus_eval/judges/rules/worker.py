"""A worker process of the rules judge (:mod:`.pool`): ``python -m consensus_eval.judges.rules.worker``.

It reads length-prefixed pickles on its standard input, from the judge's process only: the rubric (as its
JSON dump) first, then (chunk number, cases); for each chunk it writes (chunk number, results) on its
standard output: each case's judgments by dimension, or the exception its check raised (its text when the
exception does not pickle). It ends when its input closes.
"""

from __future__ import annotations

import pickle
import sys
from typing import IO, Any

from consensus_eval.domain.rubric import Rubric
from consensus_eval.judges.rules.pool import HEADER
from consensus_eval.judges.rules.rubric_rules import rules_for


def main() -> None:
    """Serve chunks until the input closes (module docstring)."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but the replies goes to the pipe the judge reads
    first = _read(stdin)
    if first is None:
        return
    rubric = Rubric.model_validate(first)
    rules = rules_for(rubric)
    while (message := _read(stdin)) is not None:
        chunk, cases = message
        out: list[Any] = []
        for case in cases:
            try:
                out.append(rules.check_case(case, rubric))
            except Exception as e:  # noqa: BLE001 - one case's failure is that case's: the runner records it failed
                out.append(_sendable(e))
        data = pickle.dumps((chunk, out), protocol=pickle.HIGHEST_PROTOCOL)
        stdout.write(HEADER.pack(len(data)) + data)
        stdout.flush()


def _sendable(e: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(e))
    except Exception:  # noqa: BLE001 - an exception that does not pickle is sent as its text
        return RuntimeError(f"{type(e).__name__}: {e}")
    return e


def _read(stream: IO[bytes]) -> Any:
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    size, = HEADER.unpack(head)
    return pickle.loads(stream.read(size))


if __name__ == "__main__":
    main()
