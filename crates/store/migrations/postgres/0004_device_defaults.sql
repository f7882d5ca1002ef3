-- Every device names an IoT endpoint (an asset its gateway's), and `last_data_at` and `signal`
-- are 0 until known (docs/api.md, "Physical devices"): the API types all three as non-null.
UPDATE physical_devices SET last_data_at = 0 WHERE last_data_at IS NULL;
UPDATE physical_devices SET signal = 0 WHERE signal IS NULL;
UPDATE physical_devices AS d
   SET id_iot_device = g.id_iot_device
  FROM physical_devices AS g
 WHERE g.id_physical_device = d.id_parent AND d.id_iot_device IS NULL;
ALTER TABLE physical_devices
    ALTER COLUMN last_data_at SET DEFAULT 0,
    ALTER COLUMN last_data_at SET NOT NULL,
    ALTER COLUMN signal SET DEFAULT 0,
    ALTER COLUMN signal SET NOT NULL;
