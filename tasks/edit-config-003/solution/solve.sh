#!/bin/bash
sed -i 's/^backup_dir=.*/backup_dir=warm/' /app/etc/hidden_lemon.conf
