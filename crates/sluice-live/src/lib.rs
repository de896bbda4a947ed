pub mod wire;
