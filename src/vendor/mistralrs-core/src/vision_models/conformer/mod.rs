pub mod config;
pub mod encoder;
pub mod nemo;
pub mod pos_embed;
