-- Every device names an IoT endpoint (an asset its gateway's), and `last_data_at` and `signal`
-- are 0 until known (docs/api.md, "Physical devices"): the API types all three as non-null.
UPDATE physical_devices SET last_data_at = 0 WHERE last_data_at IS NULL;
UPDATE physical_devices SET signal = 0 WHERE signal IS NULL;
UPDATE physical_devices
   SET id_iot_device = (SELECT g.id_iot_device FROM physical_devices AS g
                         WHERE g.id_physical_device = physical_devices.id_parent)
 WHERE id_iot_device IS NULL AND id_parent IS NOT NULL;
