//! HTTP edge (axum).
