#!/bin/bash
chmod 600 /app/magnet/mellow_glacier.key
chmod 700 /app/magnet/early_acorn.sh
