#!/bin/bash
find /app/timber -type f -size +1000c > /app/large.txt
