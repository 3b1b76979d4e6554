//! Broadcasting and strided views over a caller buffer, without copying.
//!
//! Run with `cargo run -p rml-examples --example broadcast_views`.

use rml_core::{Shape, TensorView, broadcast_shapes};

fn main() -> Result<(), rml_core::Error> {
    let column = [1.0f32, 2.0, 3.0];
    let row = [10.0f32, 20.0];
    let a = TensorView::new(&column, Shape::new(&[3, 1])?)?;
    let b = TensorView::new(&row, Shape::new(&[2])?)?;
    let shape = broadcast_shapes(a.shape(), b.shape())?;
    let (a, b) = (a.broadcast_to(&shape)?, b.broadcast_to(&shape)?);
    println!("a + b over shape {shape}:");
    for i in 0..shape.dim(0) {
        let sums: Vec<f32> = (0..shape.dim(1))
            .map(|j| Ok(a.get(&[i, j])? + b.get(&[i, j])?))
            .collect::<Result<_, rml_core::Error>>()?;
        println!("  {sums:?}");
    }
    Ok(())
}
