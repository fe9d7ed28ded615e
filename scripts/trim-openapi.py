#!/usr/bin/env python3
"""Trim a Swagger 2.0 document to the operations an adapter calls.

usage: trim-openapi.py IN.json OUT.json 'METHOD /path' ...

Keeps the named operations (and their path-level parameters) and every
definition they reference, transitively; the rest of the document (info,
consumes, produces, security) as it is. Used for the vendors' definitions
under adapters/*/testdata (a tracked file must stay under 1 MB).
"""
import json
import sys


def main(src, dst, ops):
    doc = json.load(open(src))
    paths = {}
    for op in ops:
        method, path = op.split(" ", 1)
        item = doc["paths"][path]
        kept = paths.setdefault(path, {k: v for k, v in item.items() if k == "parameters"})
        kept[method.lower()] = item[method.lower()]
    defs = doc.get("definitions", {})
    need = set()

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "$ref" and isinstance(v, str) and v.startswith("#/definitions/"):
                    name = v[len("#/definitions/"):]
                    if name not in need:
                        need.add(name)
                        walk(defs[name])
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(paths)
    out = {k: v for k, v in doc.items() if k not in ("paths", "definitions")}
    out["paths"] = paths
    out["definitions"] = {n: defs[n] for n in sorted(need)}
    with open(dst, "w") as f:
        f.write(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
