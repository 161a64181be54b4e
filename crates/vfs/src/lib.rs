//! The namespace: the mount table, logical path resolution and the `Driver` interface through
//! which every path operation of a traced program goes. Local files are the first driver.
