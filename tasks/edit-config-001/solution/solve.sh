#!/bin/bash
sed -i 's/^cache_size=.*/cache_size=6117/' /app/etc/grand_violet.conf
