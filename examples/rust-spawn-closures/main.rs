//! rust-spawn-closures — the box office of a small venue on the morning sales
//! open.
//!
//! A list of booking requests (customer, seat) is served by four clerk
//! threads started with `thread::spawn` closures; each clerk takes the next
//! request from a shared queue. A clerk checks that the seat is still free,
//! issues a signed ticket for it and records the sale in the seating plan.
//! After the rush, the auditor (in `thread::scope`, one thread per block
//! of rows) checks that every ticket handed out is the one recorded for its
//! seat, i.e. that no seat was sold twice.
//!
//! The request list is the same in every run (the rush of the opening
//! minutes: the front rows are asked for first and by several customers);
//! which clerk serves which request, and when, differs from run to run.
//!
//! Exit status: 0 if the sales audit passes, 1 (one line on stderr) if not.
//!
//! Build: rustc -g -C opt-level=1 --edition 2021 --crate-name rust_spawn_closures -D warnings \
//!            -o rust-spawn-closures main.rs

use std::collections::{HashMap, VecDeque};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::thread;

const ROWS: u32 = 20;
const SEATS_PER_ROW: u32 = 24;
const CLERKS: usize = 4;

#[derive(Clone, Debug)]
pub struct Request {
    pub customer: u32,
    pub seat: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ticket {
    pub seat: u32,
    pub customer: u32,
    pub code: u64,
}

/// The seating plan: which ticket holds which seat.
#[derive(Default)]
pub struct Venue {
    sold: Mutex<HashMap<u32, Ticket>>,
}

impl Venue {
    pub fn is_taken(&self, seat: u32) -> bool {
        self.sold.lock().unwrap().contains_key(&seat)
    }

    pub fn record_sale(&self, ticket: &Ticket) {
        self.sold.lock().unwrap().insert(ticket.seat, ticket.clone());
    }

    pub fn ticket_for(&self, seat: u32) -> Option<Ticket> {
        self.sold.lock().unwrap().get(&seat).cloned()
    }
}

/// The requests of the opening rush, in arrival order: customers go for the
/// front rows first, so the same good seats are asked for several times.
pub fn opening_requests() -> Vec<Request> {
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut requests = Vec::new();
    for customer in 0..360u32 {
        // The row a customer wants drifts backwards as the front fills up.
        let wanted_row = (customer / 24 + (next() % 3) as u32).min(ROWS - 1);
        let seat = wanted_row * SEATS_PER_ROW + (next() % u64::from(SEATS_PER_ROW)) as u32;
        requests.push(Request { customer, seat });
    }
    requests
}

/// The ticket's signature: what the gate scanners check.
pub fn sign_ticket(customer: u32, seat: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ (u64::from(customer) << 32 | u64::from(seat));
    for round in 0..1000u64 {
        h ^= round.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        h ^= h >> 29;
    }
    h
}

pub fn issue_ticket(req: &Request) -> Ticket {
    Ticket { seat: req.seat, customer: req.customer, code: sign_ticket(req.customer, req.seat) }
}

/// Sell req's seat if it is free; the ticket, or None if the seat is gone.
pub fn try_book(venue: &Venue, req: &Request) -> Option<Ticket> {
    if venue.is_taken(req.seat) {
        return None;
    }
    let ticket = issue_ticket(req);
    venue.record_sale(&ticket);
    Some(ticket)
}

fn next_request(queue: &Mutex<VecDeque<Request>>) -> Option<Request> {
    queue.lock().unwrap().pop_front()
}

/// Tickets handed out whose seat is recorded for someone else (checked by
/// one thread per block of rows).
pub fn audit(venue: &Venue, handed_out: &[Ticket]) -> Vec<(Ticket, Option<Ticket>)> {
    const BLOCKS: u32 = 4;
    let rows_per_block = ROWS / BLOCKS;
    thread::scope(|s| {
        let checkers: Vec<_> = (0..BLOCKS)
            .map(|b| {
                let first = b * rows_per_block * SEATS_PER_ROW;
                let last = first + rows_per_block * SEATS_PER_ROW;
                s.spawn(move || {
                    handed_out
                        .iter()
                        .filter(|t| t.seat >= first && t.seat < last)
                        .filter_map(|t| {
                            let recorded = venue.ticket_for(t.seat);
                            (recorded.as_ref() != Some(t)).then(|| (t.clone(), recorded))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        checkers.into_iter().flat_map(|c| c.join().unwrap()).collect()
    })
}

fn main() -> ExitCode {
    let venue = Arc::new(Venue::default());
    let queue = Arc::new(Mutex::new(VecDeque::from(opening_requests())));

    let clerks: Vec<_> = (0..CLERKS)
        .map(|_| {
            let venue = Arc::clone(&venue);
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                let mut sold = Vec::new();
                while let Some(req) = next_request(&queue) {
                    if let Some(ticket) = try_book(&venue, &req) {
                        sold.push(ticket);
                    }
                }
                sold
            })
        })
        .collect();
    let handed_out: Vec<Ticket> = clerks.into_iter().flat_map(|c| c.join().unwrap()).collect();

    let bad = audit(&venue, &handed_out);
    if let Some((ticket, recorded)) = bad.first() {
        let holder = recorded.as_ref().map_or("nobody".to_string(), |r| format!("customer {}", r.customer));
        eprintln!(
            "rust-spawn-closures: seat {} sold twice: customer {} holds a ticket, the plan says {} (bad tickets: {})",
            ticket.seat,
            ticket.customer,
            holder,
            bad.len()
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
