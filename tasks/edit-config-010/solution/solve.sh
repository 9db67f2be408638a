#!/bin/bash
sed -i 's/^cache_size=.*/cache_size=415/' /app/etc/smooth_prism.conf
