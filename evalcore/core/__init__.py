"""Arrays in, arrays out: protocols and ground truth, the tiled ranking kernel, metrics, open set."""
