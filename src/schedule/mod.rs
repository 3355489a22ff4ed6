//! Tensor graph -> list of kernels.

pub mod cache;
pub mod item;
pub mod kernel;
pub mod layout;
pub mod multi;
pub mod order;
pub mod rangeify;
pub mod realize;
pub mod split_reduce;
pub mod unbind;

pub use item::{Schedule, ScheduleStep, Slot};
pub use kernel::{create_schedule, Devices};
pub use multi::{graph_device, graph_devices, lower_multi, multi, multi_axis};
pub use unbind::{rebind, unbind, unbind_graph, VarVals};
