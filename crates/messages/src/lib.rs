//! What ksearch says to a brain and reads back, without any way of sending it: chat
//! [`Message`]s and their roles, the request and response types a provider speaks
//! ([`ChatRequest`], [`ChatResponse`], [`Usage`]), and [`extract`], which pulls structured
//! answers (JSON objects, multi-file code) out of free-form text.
//!
//! The pure engine (ksearch-search) depends on this crate alone, so it builds without HTTP, TLS
//! or an async runtime; ksearch-llm (the providers) re-exports everything here. Nothing in this
//! crate performs I/O.

#![warn(missing_docs)]

pub mod extract;
mod types;

pub use types::{ChatRequest, ChatResponse, FinishReason, Message, Role, Usage};
