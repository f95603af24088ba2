"""The HTTP routes, one module per resource: answers (search, ask), kbs (listing, documents), runs
(run folders and their reports), openai (the chat-completions face), pages (health, page, API docs)."""
