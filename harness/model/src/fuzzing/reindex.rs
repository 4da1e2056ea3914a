//! Deleting operations from a sequence while the operations after them keep acting on the same instances, for the shrinker.
//!
//! An operation names an instance by its position among those that exist
//! when it is applied ([`Driver`]'s indexes). Deleting an operation that
//! created an instance (a `Start`, a delegation, a spawning turn) shifts
//! every later position, so a later `Resume` of the child lands on the root
//! and the deletion no longer fails. [`delete_keeping_references`] deletes
//! and then rewrites each later instance index to the position the same
//! instance has in the shorter sequence. An instance is identified by the
//! operation that created it and its rank among that operation's creations,
//! which survive the deletion where ids (handed out by a counter) do not.

use std::ops::Range;

use super::*;

/// Where an instance came from: the creating operation's index in the
/// original sequence, and its rank among what that operation created.
type Origin = (usize, usize);

/// Which list of instances an operation's index picks from.
#[derive(Clone, Copy)]
enum Among {
    /// Every instance handed out so far.
    All,
    /// Every instance but the one the operation's first index picked (a
    /// model's lifecycle tool acts on another instance than its caller).
    OthersThanFirst,
    /// The instances not yet in a terminal state (a race's follow-ups).
    Live,
}

/// The instance indexes of `op`, each with the list it picks from.
fn instance_indexes(op: &mut Op) -> Vec<(&mut u8, Among)> {
    use Among::*;
    match op {
        Op::Delegate { parent, .. }
        | Op::Prepare { parent }
        | Op::ReceiptUse { parent, .. }
        | Op::DriftDelegate { parent, .. }
        | Op::WrittenDelegate { parent, .. } => vec![(parent, All)],
        Op::Turn { instance, .. }
        | Op::ToolCall { instance, .. }
        | Op::End { instance, .. }
        | Op::Resume { instance }
        | Op::Fork { instance }
        | Op::Event { instance, .. }
        | Op::Wait { instance }
        | Op::Score { instance, .. }
        | Op::AutoCall { instance, .. }
        | Op::GrantCall { instance, .. }
        | Op::RewriteTool { instance, .. }
        | Op::LookAlikeCall { instance, .. }
        | Op::Question { instance, .. }
        | Op::GrantDrift { instance, .. } => vec![(instance, All)],
        Op::Issue { agent, .. } | Op::CapabilityUse { agent, .. } => vec![(agent, All)],
        Op::ModelLifecycle {
            instance, target, ..
        } => vec![(instance, All), (target, OthersThanFirst)],
        Op::Race { what, instance, .. } => {
            let among = if *what % 2 == 0 { All } else { Live };
            vec![(instance, among)]
        }
        _ => vec![],
    }
}

/// A driver configured as the differential translation configures one for `ops`.
fn driver_for(ops: &[Op]) -> Driver {
    Driver::with_configuration(configuration_for(ops))
}

/// The origins of the instances `driver` handed out, in its order, and the
/// lists an index picks from.
struct Tracked {
    driver: Driver,
    origins: Vec<Origin>,
}

impl Tracked {
    fn new(ops: &[Op]) -> Tracked {
        Tracked {
            driver: driver_for(ops),
            origins: Vec::new(),
        }
    }

    /// The origins of the list `among` names, `first` being the origin the
    /// operation's first index resolved to.
    fn list(&self, among: Among, first: Option<Origin>) -> Vec<Origin> {
        let ids = &self.driver.instances;
        self.origins
            .iter()
            .zip(ids)
            .filter(|(origin, id)| match among {
                Among::All => true,
                Among::OthersThanFirst => Some(**origin) != first,
                Among::Live => self
                    .driver
                    .world
                    .state
                    .instances
                    .get(*id)
                    .is_some_and(|i| !i.state.is_terminal()),
            })
            .map(|(origin, _)| *origin)
            .collect()
    }

    /// Applies `op` (operation `index` of the original sequence) and notes
    /// the origin of every instance it handed out.
    fn step(&mut self, index: usize, op: &Op) {
        self.driver.step(op);
        let created = self.driver.instances.len() - self.origins.len();
        self.origins.extend((0..created).map(|rank| (index, rank)));
    }
}

/// What each instance index of each operation of `ops` resolved to when
/// the whole sequence was applied (`None`: no instance, an id nobody issued).
fn resolved(ops: &[Op]) -> Vec<Vec<Option<Origin>>> {
    let mut tracked = Tracked::new(ops);
    let mut out = Vec::with_capacity(ops.len());
    for (index, op) in ops.iter().enumerate() {
        let mut op = op.clone();
        let mut first = None;
        let mut picked = Vec::new();
        for (k, (value, among)) in instance_indexes(&mut op).into_iter().enumerate() {
            let origin = pick(&tracked.list(among, first), *value);
            if k == 0 {
                first = origin;
            }
            picked.push(origin);
        }
        out.push(picked);
        tracked.step(index, &op);
    }
    out
}

/// `ops` without the operations in `deleted`, every later instance index
/// rewritten to where the instance it named in `ops` stands now. An index
/// whose instance is gone (its creator deleted, or it no longer comes
/// about) is left as it was, as is one past `u8`'s range.
pub fn delete_keeping_references(ops: &[Op], deleted: Range<usize>) -> Vec<Op> {
    let before = resolved(ops);
    let kept: Vec<(usize, &Op)> = ops
        .iter()
        .enumerate()
        .filter(|(i, _)| !deleted.contains(i))
        .collect();
    let shorter: Vec<Op> = kept.iter().map(|(_, op)| (*op).clone()).collect();
    let mut tracked = Tracked::new(&shorter);
    let mut out = Vec::with_capacity(kept.len());
    for (index, op) in kept {
        let mut op = op.clone();
        let mut first = None;
        for (k, (value, among)) in instance_indexes(&mut op).into_iter().enumerate() {
            let wanted = before[index][k].filter(|(creator, _)| !deleted.contains(creator));
            let list = tracked.list(among, first);
            if let Some(position) = wanted
                .and_then(|w| list.iter().position(|o| *o == w))
                .and_then(|p| u8::try_from(p).ok())
            {
                *value = position;
            }
            if k == 0 {
                first = pick(&list, *value);
            }
        }
        tracked.step(index, &op);
        out.push(op);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> Op {
        Op::Start {
            sandbox: 1,
            policy: 1,
            tools: 7,
        }
    }

    /// Two roots, a child of the second spawned by its turn, then closed
    /// and resumed: deleting the first root moves every later operation's
    /// instance down by one, and only the rewritten sequence still closes
    /// and resumes the child (the plain deletion would resume the root).
    #[test]
    fn deleting_a_creator_keeps_later_operations_on_the_same_instances() {
        let ops = vec![
            start(),
            start(),
            Op::Turn {
                instance: 1,
                marker: 1,
            },
            Op::End {
                instance: 2,
                how: 0,
            },
            Op::Resume { instance: 2 },
        ];
        let shorter = delete_keeping_references(&ops, 0..1);
        assert_eq!(
            shorter,
            vec![
                start(),
                Op::Turn {
                    instance: 0,
                    marker: 1,
                },
                Op::End {
                    instance: 1,
                    how: 0,
                },
                Op::Resume { instance: 1 },
            ]
        );
        // The plain deletion: index 2 of two instances is the root again.
        let mut driver = driver_for(&ops[1..]);
        for op in &ops[1..] {
            driver.step(op);
        }
        assert_eq!(driver.instances.len(), 2, "a root and its child");
        assert_eq!(
            pick(&driver.instances, 2),
            Some(driver.instances[0].clone())
        );
    }

    /// A model lifecycle target is an index among the caller's others; an
    /// instance whose creator is deleted keeps its index as it was.
    #[test]
    fn a_lifecycle_target_is_rewritten_among_the_callers_others_and_a_lost_instance_is_left_alone()
    {
        let ops = vec![
            start(),
            start(),
            Op::Turn {
                instance: 1,
                marker: 1,
            },
            Op::ModelLifecycle {
                instance: 1,
                target: 1,
                call: 3,
            },
            Op::Turn {
                instance: 0,
                marker: 0,
            },
        ];
        assert_eq!(
            delete_keeping_references(&ops, 0..1),
            vec![
                start(),
                Op::Turn {
                    instance: 0,
                    marker: 1,
                },
                Op::ModelLifecycle {
                    instance: 0,
                    target: 0,
                    call: 3,
                },
                Op::Turn {
                    instance: 0,
                    marker: 0,
                },
            ],
            "the child is the root's only other; the deleted root's turn keeps its index"
        );
    }
}
