#!/bin/bash
find /app/timber -type f -name '*.conf' > /app/found.txt
