//! Temporary profiling driver (not committed).
use delegation_model::fuzzing::{corpus_dir, fuzz_model_sequence};
fn main() {
    let dir = corpus_dir("model_sequence");
    let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    inputs.sort();
    let reps: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1);
    let t = std::time::Instant::now();
    for _ in 0..reps {
        for i in &inputs {
            fuzz_model_sequence(i);
        }
    }
    let n = reps * inputs.len();
    eprintln!(
        "{n} inputs in {:?}: {:.0}/s",
        t.elapsed(),
        n as f64 / t.elapsed().as_secs_f64()
    );
}
