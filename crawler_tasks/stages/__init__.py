"""The flow of a page: seed (and its feeds) → enqueue through the gate → fetch →
parse → store, with the process runtime they share."""
