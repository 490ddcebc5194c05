//! The values' region: which segments it holds, and the column's slices
//! and lookups with and without it.

use super::*;
use crate::dense::column::Column;
use crate::sync::Ordering;

#[test]
fn the_region_holds_whole_segments_from_the_second() {
    // Segments of 64, 128, 256… from position 64 on: whole ones, within
    // the cap, cut at the limit.
    assert_eq!(FlatValues::<u64>::fit(64, u32::MAX, 127), 0);
    assert_eq!(FlatValues::<u64>::fit(64, u32::MAX, 128), 128);
    assert_eq!(FlatValues::<u64>::fit(64, u32::MAX, 383), 128);
    assert_eq!(FlatValues::<u64>::fit(64, u32::MAX, 384), 384);
    assert_eq!(FlatValues::<u64>::fit(64, 300, u32::MAX as u64), 236);
    assert_eq!(FlatValues::<u64>::fit(64, 64, u32::MAX as u64), 0);
    // Segments of 1, 2, 4…: six positions are segments 1 and 2.
    assert_eq!(FlatValues::<u64>::fit(1, u32::MAX, 6), 6);
    assert_eq!(FlatValues::<u64>::fit(1, u32::MAX, 13), 6);
    // At most 1 GiB of values, whatever the cap.
    let most = FlatValues::<u64>::fit(64, u32::MAX, (FLAT_BYTES / 8) as u64);
    assert!(most as usize * 8 <= FLAT_BYTES && most as usize * 16 > FLAT_BYTES);
}

#[test]
fn zero_sized_values_take_no_region() {
    assert_eq!(FlatValues::<()>::reserve(64, u32::MAX, u32::MAX).len(), 0);
}

/// The live runs of `0..end` of a column: the first cell's address and the
/// count, each.
fn live_runs(column: &Column<u64>, end: u32) -> Vec<(usize, usize)> {
    column
        .live_runs(end)
        .map(|(values, len)| (values as usize, len))
        .collect()
}

#[cfg(all(unix, target_pointer_width = "64"))]
#[test]
fn a_column_with_a_region_is_two_slices_and_finds_values_in_it() {
    let column = Column::<u64>::new(6, u32::MAX, u32::MAX);
    column.ensure_below(1000);
    let runs = live_runs(&column, 1000);
    // The process's budget of regions may be spent by other tests' pools;
    // then the column does without, one run per segment.
    if column.flat().len() == 0 {
        assert_eq!(runs.len(), 5);
        return;
    }
    assert_eq!(runs.iter().map(|r| r.1).collect::<Vec<_>>(), [64, 936]);
    // Within the first segment, one run.
    assert_eq!(
        live_runs(&column, 10)
            .iter()
            .map(|r| r.1)
            .collect::<Vec<_>>(),
        [10]
    );
    // Past a region that holds only the second segment, a run per segment.
    let small = Column::<u64>::new(6, u32::MAX, 200);
    small.ensure_below(1000);
    if small.flat().len() == 128 {
        assert_eq!(
            live_runs(&small, 1000)
                .iter()
                .map(|r| r.1)
                .collect::<Vec<_>>(),
            [64, 128, 256, 512, 40]
        );
    }
    let base = column.flat().base();
    assert_eq!(runs[1].0, base as usize);
    // The stagger past the region's start: a huge-page boundary for a
    // region of 2 MiB or more, a page boundary for a smaller one (as under
    // an address-space limit, which cuts every region to a 64th of it).
    let bytes = column.flat().len() as usize * 8 + STAGGER;
    let align = if bytes >= crate::region::HUGE_PAGE {
        crate::region::HUGE_PAGE
    } else {
        4096
    };
    assert_eq!(base as usize % align, STAGGER);
    for position in [0, 63, 64, 65, 191, 192, 999] {
        // SAFETY: positions below 1000 are allocated (`ensure_below`), and
        // this thread allocated them.
        let at = unsafe { column.value_at(position) }.as_ptr() as usize;
        let expected = if position < 64 {
            runs[0].0 + position as usize * 8
        } else {
            base as usize + (position as usize - 64) * 8
        };
        assert_eq!(at, expected, "position {position}");
    }
}

#[test]
fn a_column_without_a_region_is_a_slice_per_segment() {
    let column = Column::<u64>::new(6, u32::MAX, 0);
    column.ensure_below(1000);
    assert_eq!(
        live_runs(&column, 1000)
            .iter()
            .map(|r| r.1)
            .collect::<Vec<_>>(),
        [64, 128, 256, 512, 40]
    );
    for position in [0, 63, 64, 191, 192, 999] {
        // SAFETY: as above.
        let at = unsafe { column.value_at(position) }.as_ptr() as usize;
        let cell = column.cell(position).value as usize;
        assert_eq!(at, cell, "position {position}");
    }
}

#[test]
fn the_region_ends_at_a_segment_end_within_its_cap_and_the_limit() {
    for shift in 0..7u32 {
        let first = 1u64 << shift;
        for limit in 1..300u32 {
            for cap in 0..300u64 {
                let len = u64::from(FlatValues::<u64>::fit(first, limit, cap));
                if len == 0 {
                    continue;
                }
                assert!(len <= cap && first + len <= u64::from(limit));
                // Segments 1..=k end `first * (2^(k + 1) - 2)` past `first`,
                // the last cut at the limit.
                let ends =
                    (1..33u32).map(|k| ((first << (k + 1)) - first).min(u64::from(limit)) - first);
                assert!(
                    ends.take_while(|&end| end <= len).any(|end| end == len),
                    "first {first}, limit {limit}, cap {cap}: {len} is no segment's end"
                );
            }
        }
    }
}

#[cfg(all(unix, target_pointer_width = "64"))]
#[test]
fn segments_are_in_the_region_exactly_where_the_column_says() {
    for shift in 0..4u32 {
        for limit in [1u32, 2, 3, 5, 9, 17, 40, 100, 1000] {
            for cap in [0u32, 1, 2, 6, 7, 14, 30, 100, u32::MAX] {
                let column = Column::<u64>::new(shift, limit, cap);
                column.ensure_below(limit);
                let flat = column.flat();
                let start = flat.base() as usize;
                let end = start + flat.len() as usize * 8;
                let case = format!("shift {shift}, limit {limit}, cap {cap}");
                for segment in (0..40).take_while(|&s| column.start(s) < u64::from(limit)) {
                    let values = column.values[segment].load(Ordering::Relaxed) as usize;
                    let inside = flat.len() > 0 && (start..end).contains(&values);
                    assert_eq!(
                        inside,
                        column.is_in_region(segment),
                        "{case}, segment {segment}"
                    );
                }
                for position in 0..limit {
                    // SAFETY: allocated above (`ensure_below`), by this thread.
                    let at = unsafe { column.value_at(position) }.as_ptr();
                    assert_eq!(
                        at,
                        column.cell(position).value,
                        "{case}, position {position}"
                    );
                }
                let total: usize = column.live_runs(limit).map(|run| run.1).sum();
                assert_eq!(total, limit as usize, "{case}");
            }
        }
    }
}
