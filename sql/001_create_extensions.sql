-- pgvector gives the embedding columns and HNSW indexes. Every other feature uses core PostgreSQL only
-- (the embedded server has just plpgsql and vector: no pg_trgm or other contrib extensions).
create extension if not exists vector;
