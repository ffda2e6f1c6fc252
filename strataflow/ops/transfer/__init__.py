"""Moving memory in and out: `strataflow export` and `strataflow import` (every layer of a namespace as one
versioned JSONL file, restored elsewhere with ids renumbered and lineage kept) and `strataflow import
--from-mem0` (memories of a mem0 store or a mem0 platform export, as entries). The file format is
models/transfer.py; export.py writes it, restore.py, layers.py and memory_rows.py read it back through the
layers' own writers, mem0.py reads mem0. The commands are in strataflow/commands/transfer.py;
docs/moving.md tells the user's side.
"""
