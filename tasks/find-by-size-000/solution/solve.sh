#!/bin/bash
find /app/heron -type f -size +5000c > /app/large.txt
