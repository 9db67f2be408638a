#!/bin/bash
find /app/willow -type f -name '*.csv' > /app/found.txt
