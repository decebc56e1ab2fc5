//! Unit tests of the hub: the ring, replay and the dropping of slow subscribers.
