pub mod autoencoder;
pub mod model;
pub mod sampling;
pub mod stepper;
