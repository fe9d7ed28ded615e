#!/usr/bin/env python3
"""Trim a Swagger 2.0 or OpenAPI 3 document to the operations an adapter calls.

usage: trim-openapi.py IN.json OUT.json 'METHOD /path' ...

Keeps the named operations (and their path-level parameters) and every
part of the document they reference ("$ref": "#/definitions/X" in Swagger
2.0, "#/components/SECTION/X" in OpenAPI 3), transitively; the rest of the
document (info, consumes, produces, security, servers) as it is. Examples
are dropped from OpenAPI 3 documents (the contract checker does not read
them). Used for the vendors' definitions under adapters/*/testdata (a
tracked file must stay under 1 MB).
"""
import json
import sys


def strip_examples(x):
    if isinstance(x, dict):
        return {k: strip_examples(v) for k, v in x.items() if k not in ("examples", "example")}
    if isinstance(x, list):
        return [strip_examples(v) for v in x]
    return x


def main(src, dst, ops):
    doc = json.load(open(src))
    v3 = "openapi" in doc
    if v3:
        doc = strip_examples(doc)
    paths = {}
    for op in ops:
        method, path = op.split(" ", 1)
        item = doc["paths"][path]
        kept = paths.setdefault(path, {k: v for k, v in item.items() if k == "parameters"})
        kept[method.lower()] = item[method.lower()]
    need = set()  # (section..., name) pointers into doc

    def resolve(pointer):
        node = doc
        for part in pointer:
            node = node[part]
        return node

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "$ref" and isinstance(v, str) and v.startswith("#/"):
                    pointer = tuple(v[2:].split("/"))
                    if pointer not in need:
                        need.add(pointer)
                        walk(resolve(pointer))
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(paths)
    top = "components" if v3 else "definitions"
    out = {k: v for k, v in doc.items() if k not in ("paths", top)}
    out["paths"] = paths
    kept = {}
    for pointer in sorted(need):
        node = kept
        for part in pointer[:-1]:
            node = node.setdefault(part, {})
        node[pointer[-1]] = resolve(pointer)
    out[top] = kept.get(top, {})
    if v3 and "securitySchemes" in doc.get("components", {}):
        out[top]["securitySchemes"] = doc["components"]["securitySchemes"]
    if v3:
        out.pop("x-webhooks", None)
        out.pop("webhooks", None)
    with open(dst, "w") as f:
        f.write(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
