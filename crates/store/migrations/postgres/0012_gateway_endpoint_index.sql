-- A gateway's MQTT endpoint is found by its device at every hello and departure, and by the
-- rights check of every command (the node holding its connection): an index, not a scan of
-- every gateway's endpoint.
CREATE INDEX iot_devices_physical_device ON iot_devices (id_physical_device);
