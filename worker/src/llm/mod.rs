//! LLM clients (being written).
