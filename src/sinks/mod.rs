//! Where results go: the events a run emits and the reporters that consume them (events), the one results
//! model built from them (report), the output formats behind one [`export::Exporter`] interface, one file each
//! (json, junit, markdown), and the writing of the asked-for files (outputs). Formats import the model, never
//! the reverse.

pub mod events;
pub mod export;
pub mod exports;
mod github;
pub mod json;
mod junit;
pub mod line;
pub mod markdown;
pub mod outputs;
pub mod report;
