"""Model plumbing: the litellm gateway, prompt blocks, embeddings and the offline provider."""
