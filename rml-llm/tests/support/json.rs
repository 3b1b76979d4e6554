//! Reading the JSON fixtures the Python scripts write.

/// A JSON array of token ids.
pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("token ids are an array")
        .iter()
        .map(|x| x.as_u64().expect("a token id is a whole number") as u32)
        .collect()
}
