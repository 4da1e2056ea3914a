use delegation_model::fuzzing::*;
use delegation_model::*;
#[test]
fn scratch() {
    let mut x: u64 = 88172645463325252;
    let mut found = 0;
    for _ in 0..20000 {
        let bytes: Vec<u8> = (0..120)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        let ops = decode_ops(&bytes);
        let mut d = Driver::new();
        for (k, op) in ops.iter().enumerate() {
            let from = d.world.history.len();
            d.apply(op);
            for e in &d.world.history[from..] {
                if let StepKind::Action { result: Ok(r), .. } = &e.kind {
                    if r.detail
                        .as_deref()
                        .is_some_and(|t| t.contains("could not be recorded"))
                    {
                        found += 1;
                        if found < 4 {
                            println!("{:?}", &ops[..=k]);
                        }
                    }
                }
            }
        }
    }
    println!("found {found}");
}
