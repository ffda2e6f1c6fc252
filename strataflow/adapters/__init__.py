"""The drop-ins as a library: how mem0's memories and LangGraph's store items are strataflow memory items,
and every operation the /mem0 routes, the /v1/store route and `strataflow import --from-mem0` perform on
them. The routes only parse a request, call one function here and shape its answer
(strataflow.service.mem0_shapes, the store's schemas).

- `conditions`: the one compiler of filter conditions into SQL (a value, eq, ne, gt, gte, lt, lte, in, nin,
  contains, icontains, "*"), over a JSON field (a store item's value, a memory's metadata) or a column;
- `mem0_filters`: mem0's filter grammar (flat metadata fields and the `metadata` object, the entity ids,
  the operators, AND / OR / NOT, as mem0 OSS parses them) compiled to one SQL condition;
- `mem0`: names, metadata and the operations of the mem0-compatible API (add, search, get_all, update,
  batch update and delete, delete_all, entities, events);
- `store_paths`, `store_names`: LangGraph's field paths (one text, and one vector, per path) and how a
  namespace and key name an item;
- `store`: the operations of LangGraph's BaseStore (get, put, search, list_namespaces) with the time to
  live, namespace prefixes and value filters in SQL.

Every write goes through the one L2 API (strataflow.memory.api) and every ranked search through the one
ranking (strataflow.retrieval.item_search), so a memory written through a drop-in is the same item the
CLI, /v1/memories, MCP and the context builder see. The caller owns the transaction.
"""
