//! Tensor graph -> list of kernels.

pub mod cache;
pub mod kernel;
pub mod layout;
pub mod memory;
pub mod multi;
pub mod order;
pub mod rangeify;
pub mod realize;
pub mod split_reduce;
pub mod unbind;

pub use kernel::{buffer_view, create_schedule, view_buffer, ScheduleItem};
pub use memory::memory_planner;
pub use multi::{graph_device, graph_devices, lower_multi, multi, multi_axis};
pub use unbind::{rebind, unbind, unbind_graph, VarVals};
