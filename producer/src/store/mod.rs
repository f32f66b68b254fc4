//! Storage: sea-orm entities and queries (being written).
