#!/usr/bin/env python3
"""Checks structured outputs with validators that are not pagoda's: Debian's python3-jsonschema
for JSON schemas, Python's re for regexes, Python's ast for arithmetic expressions.

Input: a JSON-lines file; each line {"kind": "schema"|"json_object"|"regex"|"choice"|"arith",
"spec": <schema, regex, choice list or null>, "output": <the generated text>}.
Prints each failure and exits 1 if any; prints the number checked otherwise."""
import ast
import json
import re
import sys

import jsonschema


def check(rec):
    kind, spec, out = rec["kind"], rec["spec"], rec["output"]
    if kind == "schema":
        cls = jsonschema.validators.validator_for(spec, default=jsonschema.Draft202012Validator)
        cls(spec, format_checker=cls.FORMAT_CHECKER).validate(json.loads(out))
    elif kind == "json_object":
        if not isinstance(json.loads(out), dict):
            raise ValueError("not a JSON object")
    elif kind == "regex":
        if re.fullmatch(spec, out) is None:
            raise ValueError("does not fully match")
    elif kind == "choice":
        if out not in spec:
            raise ValueError("not one of the choices")
    elif kind == "arith":
        tree = ast.parse(out, mode="eval")
        allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult,
                   ast.Div, ast.USub, ast.UAdd)
        for node in ast.walk(tree):
            if not isinstance(node, allowed):
                raise ValueError(f"unexpected {type(node).__name__}")
    else:
        raise ValueError(f"unknown kind {kind}")


def main():
    failures = 0
    n = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            n += 1
            try:
                check(rec)
            except Exception as e:  # every failure is reported, then the run fails
                failures += 1
                print(f"FAIL {rec['kind']} {json.dumps(rec['spec'])[:200]}\n  output: {rec['output']!r}\n  {e}")
    print(f"checked {n}, failed {failures}")
    sys.exit(1 if failures or n == 0 else 0)


if __name__ == "__main__":
    main()
