#!/bin/bash
sed -i 's/^max_connections=.*/max_connections=7300/' /app/etc/sunny_lagoon.conf
