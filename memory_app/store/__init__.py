"""A LangGraph-style key-value store over facts: exact namespaces, filters, paging, done in the database."""
