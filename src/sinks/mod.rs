//! Where results go: the results model (report), its output formats (JUnit; the JSON document is the model
//! serialized) and the writing of the asked-for files (outputs). Formats import the model, never the reverse.

pub(crate) mod junit;
pub mod outputs;
pub mod report;
