#!/bin/bash
echo ok
